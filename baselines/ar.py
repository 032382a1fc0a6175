"""Autoregressive decoding: a one-node draft through the shared engine."""

from goose.drafting.contract import Capabilities, Drafter


class ARDrafter(Drafter):
    """AR itself, declared (capabilities.autoregressive): its rows are AR's own timing, so no AR runs beside it.
    A subclass stays AR; a drafter that merely proposes one-node drafts is not, unless it declares it."""

    name = "ar"
    capabilities = Capabilities(autoregressive=True)
