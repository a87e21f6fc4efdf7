"""Which images each rank reads, in which order: DDP batch samplers, repeat-factor sampling."""
