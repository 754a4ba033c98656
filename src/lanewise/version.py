"""The version of lanewise (its own module, so that no module imports the package ``__init__``).

Example:
    >>> __version__.count(".") >= 1
    True
"""

__version__ = "0.1.0"
