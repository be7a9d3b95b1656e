"""The SDK's version (the `kairon-sdk` distribution's), sent in its User-Agent."""

__version__ = "0.2.0"
