// The 104 class names of Kaggle's "Flower Classification with TPUs" ("Petals to the Metal"),
// index order, exactly as the competition's starter notebooks list them: 'cyclamen ' (87) and
// 'hippeastrum ' (90) end in a space there, and so they do here.
#include "strata/datasets/flowers.h"

namespace strata::datasets {

const char* const kFlowersClasses[kFlowersNumClasses] = {
    "pink primrose",    "hard-leaved pocket orchid", "canterbury bells", "sweet pea",     "wild geranium",      // 00-04
    "tiger lily",       "moon orchid",               "bird of paradise", "monkshood",     "globe thistle",      // 05-09
    "snapdragon",       "colt's foot",               "king protea",      "spear thistle", "yellow iris",        // 10-14
    "globe-flower",     "purple coneflower",         "peruvian lily",    "balloon flower", "giant white arum lily",  // 15-19
    "fire lily",        "pincushion flower",         "fritillary",       "red ginger",    "grape hyacinth",     // 20-24
    "corn poppy",       "prince of wales feathers",  "stemless gentian", "artichoke",     "sweet william",      // 25-29
    "carnation",        "garden phlox",              "love in the mist", "cosmos",        "alpine sea holly",   // 30-34
    "ruby-lipped cattleya", "cape flower",           "great masterwort", "siam tulip",    "lenten rose",        // 35-39
    "barberton daisy",  "daffodil",                  "sword lily",       "poinsettia",    "bolero deep blue",   // 40-44
    "wallflower",       "marigold",                  "buttercup",        "daisy",         "common dandelion",   // 45-49
    "petunia",          "wild pansy",                "primula",          "sunflower",     "lilac hibiscus",     // 50-54
    "bishop of llandaff", "gaura",                   "geranium",         "orange dahlia", "pink-yellow dahlia", // 55-59
    "cautleya spicata", "japanese anemone",          "black-eyed susan", "silverbush",    "californian poppy",  // 60-64
    "osteospermum",     "spring crocus",             "iris",             "windflower",    "tree poppy",         // 65-69
    "gazania",          "azalea",                    "water lily",       "rose",          "thorn apple",        // 70-74
    "morning glory",    "passion flower",            "lotus",            "toad lily",     "anthurium",          // 75-79
    "frangipani",       "clematis",                  "hibiscus",         "columbine",     "desert-rose",        // 80-84
    "tree mallow",      "magnolia",                  "cyclamen ",        "watercress",    "canna lily",         // 85-89
    "hippeastrum ",     "bee balm",                  "pink quill",       "foxglove",      "bougainvillea",      // 90-94
    "camellia",         "mallow",                    "mexican petunia",  "bromelia",      "blanket flower",     // 95-99
    "trumpet creeper",  "blackberry lily",           "common tulip",     "wild rose",                           // 100-103
};

}  // namespace strata::datasets
