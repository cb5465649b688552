"""``strata.presets``: the training recipes ``strata train --preset`` names, and their pieces.

    strata.presets.flowers.recipe(model="efficientnet_b0")   # a Recipe: strata.train(recipe)
    strata.presets.flowers.dataset("/data/train/*.tfrec")    # its input pipeline
    strata.presets.flowers.schedule(steps_per_epoch=200)     # its learning rate
    strata.presets.flowers.model()                           # its model (flowers-xception at 192 px)

``fashion_mnist`` is the default job (the reference CNN on Fashion-MNIST); ``flowers`` is Kaggle's
"Flower Classification with TPUs" (docs/flowers.md). strata.train(...) runs a recipe.
"""
from ._recipe import Preset, Recipe, Schedule, TrainResult, recipe, train

fashion_mnist = Preset("fashion_mnist")
flowers = Preset("flowers")

__all__ = ["Preset", "Recipe", "Schedule", "TrainResult", "fashion_mnist", "flowers", "recipe", "train"]
