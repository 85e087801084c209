"""Building blocks of training kernels over tiles of samples on KHR cooperative matrices (VK_KHR_cooperative_matrix),
shared by any target that trains on them: where tiles live and how they are loaded and stored (`addressing`), a
layer's passes over them (`passes`), and ReLU's derivative kept as bits between the passes (`signs`)."""
