"""Weight layouts and formats: how a Linear's weights are stored and quantized for each backend; and the numpy model
of the tensor layouts, views, loads and stores of cooperative matrices (tensor_addressing.py, tensor_memory.py)."""
