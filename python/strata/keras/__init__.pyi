from . import activations, applications, callbacks, datasets, layers, losses, optimizers, regularizers
from .models import Input, Model, Sequential
__all__ = ['Input', 'Model', 'Sequential', 'activations', 'applications', 'callbacks', 'datasets', 'layers', 'losses', 'optimizers', 'regularizers']
