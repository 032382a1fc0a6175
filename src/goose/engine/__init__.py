"""The verification engine: a tree of draft tokens verified in one forward of the target (one request in
`single`, many in `batched`), the KV cache it grows and compacts, the backends, masks and the exact sampler.
It knows nothing about methods."""
