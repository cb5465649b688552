from . import fashion_mnist
__all__ = ['fashion_mnist']
