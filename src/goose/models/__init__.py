"""Target models: identified and loaded from a model config (`loading`), GGUF files converted into cached Hugging
Face folders (`conversion`)."""
