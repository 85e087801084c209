"""Weight layouts and formats: how a Linear's weights are stored and quantized for each backend."""
