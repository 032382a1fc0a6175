"""Running one configuration: the run spec and its typed sections, the method registry, the runner, the decode
loops (one request, continuous batching), timing against AR, W&B tracking."""
