// Image classification data as folders of PNG/JPEG files, in the layout torchvision's
// ImageFolder and timm's dataset reader use: {root}/{split}/{class}/{image}. The class of an
// image is its folder; the class ids are the sub-folders of {root}/train in sorted order, so
// both splits and every run agree on them.
#pragma once

#include <string>

#include "data/idx.h"

namespace gmlp::data {

// Whether {root}/train is a directory, i.e. whether root is an image folder rather than a folder
// of IDX or CIFAR-10 files.
bool is_image_folder(const std::string& root);

// How an image folder's images are read: all of them decoded once, at load (one process: each is
// decoded once for the whole run), or each on demand, whenever a step or an evaluation takes it
// (data-parallel ranks: each decodes only its own micro-batches and evaluation batches, and holds
// no pixels).
enum class Reading { at_load, on_demand };

// Reads {root}/{split}/{class}/*.png|.jpg|.jpeg (extensions in any case; other files are
// skipped), classes sorted by name and the images of a class by file name, each converted to
// `channels` (1: luma, 3: RGB) and resized to size × size as `gmlp predict` does, then stored
// as 8-bit pixels. classes and class_names come from {root}/train. Throws gmlp::Error naming
// the folder or file: a missing split, a split without images, a class folder without images, a
// class of another split that train does not have, more than 10,000,000 images; at load, more
// pixels than fit in memory, an image that cannot be decoded (on demand: when it is read).
ImageSet load_image_folder(const std::string& root, const std::string& split, int channels, int size,
                           Reading reading = Reading::at_load);

// The training and evaluation data of `gmlp train`, `compare` and `eval`: an image folder (see
// above) when {dir}/train is a directory, CIFAR-10's binary batches when dir holds them
// (data/cifar.h), otherwise the Fashion-MNIST IDX files in dir. Only an image folder is
// converted to `channels` and `size`, and read as `reading` says; the others are read whole and
// keep their own size (check_compatible compares them with the model).
ImageSet load_images(const std::string& dir, const std::string& split, int channels, int size,
                     Reading reading = Reading::at_load);

// The images of `set` brought to size × size, for a model of another size than the data's:
// resized (load_image's filter, as predict does), or, with `pad`, placed at the centre of a
// black image (or cropped around their centre where size is smaller). Not for a set read on
// demand (an image folder's images are read at the model's size already).
ImageSet fit_images(const ImageSet& set, int size, bool pad);

}  // namespace gmlp::data
