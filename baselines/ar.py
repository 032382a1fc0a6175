"""Autoregressive decoding: a one-node draft through the shared engine."""

from goose.decode import Drafter


class ARDrafter(Drafter):
    name = "ar"
