"""Measurement: benchmark a live OpenAI-compatible endpoint (`ridgeline measure`), hold
the records against the prediction (`compare`), fit the model to them (`fit`), and
measure this host's own roofline (`probe`)."""
