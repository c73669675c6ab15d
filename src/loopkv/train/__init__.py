"""Training: teacher pretraining (tiny scale); later, codec distillation and MELT stages."""
