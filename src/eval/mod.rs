//! StateBench replay for `car-memgine-eval` (being written).
