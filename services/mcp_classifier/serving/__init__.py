"""Running `serve`: one gateway process on a bound socket, or N of them under a supervisor (`--workers N`)."""
