"""The bundled demo: a model's markdown reply with a code action, and the tools it calls."""
