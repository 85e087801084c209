"""GPU training: training-step kernel programs and the sessions that run them on the portable and cooperative-vector
targets."""
