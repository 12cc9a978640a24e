"""The model runtime: loading, tokenise -> forward -> pool, batching. Nothing outside it knows a speed-up exists."""
