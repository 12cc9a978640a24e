"""Speed-ups applied to a loaded model; the encoder checks each against the eager model and undoes a mismatch."""
