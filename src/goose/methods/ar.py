"""Autoregressive decoding: a one-node draft through the shared engine."""

from goose.drafting.contract import Drafter


class ARDrafter(Drafter):
    name = "ar"
