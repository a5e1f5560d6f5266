"""Session-wide test ordering."""


def pytest_collection_modifyitems(config, items):
    # Loading an op library adds ops to the process's registry for good (a
    # library cannot be unloaded); run those tests last so every other test
    # sees only the built-in registry.
    items.sort(key=lambda item: item.get_closest_marker("loads_op_libraries") is not None)
