"""A client for ``autoui serve`` (the Auto-UI inference server), standard library only.

    from autoui_client import Client, Action
    c = Client("http://127.0.0.1:8080")
    p = c.predict(screen="screen.png", goal="Open Settings", history=[Action.home()])
    print(p.action, p.raw)

``autoui_client.androidworld.AutoUIAgent`` runs Auto-UI on AndroidWorld.
"""

from .client import ACTION_NUMBERS, ACTION_TYPES, NO_POINT, TAP_DISTANCE, Action, AutouiError, Client, Prediction
from .images import encode_screen, png_encode

__version__ = "0.1.0"

__all__ = [
    "ACTION_NUMBERS",
    "ACTION_TYPES",
    "NO_POINT",
    "TAP_DISTANCE",
    "Action",
    "AutouiError",
    "Client",
    "Prediction",
    "encode_screen",
    "png_encode",
]
