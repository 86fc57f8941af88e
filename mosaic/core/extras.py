"""Optional packages: imported on first use, with the extra that installs them named on failure.

The base install stays what every component process needs; reading results as tables and
plots takes the ``results`` extra (pandas, pyarrow and matplotlib).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from mosaic.core.errors import MissingExtra

__all__ = ["GAMES", "IMAGES", "MLFLOW", "RESULTS", "TENSORBOARD", "VIDEO", "extra_for",
           "require"]

#: The extra with the packages that turn a store into tables, files and plots.
RESULTS = "results"
#: The extra with what PettingZoo's classic games import (pygame).
GAMES = "games"
#: The extras of the tracking sinks (mosaic.tracking): tensorboardX, and MLflow's client.
TENSORBOARD = "tensorboard"
MLFLOW = "mlflow"
#: The extra that records episodes as videos and exports replays as GIF and MP4: MoviePy (which
#: Gymnasium's RecordVideo imports), imageio and imageio-ffmpeg (ffmpeg in the wheel).
VIDEO = "video"
#: The extra that encodes images as PNG (Pillow): an operator worker's rgb_array render frames,
#: the VLM worker's image observations and the dashboard's replay frames.
IMAGES = "images"

#: Top-level modules that third-party code imports and a mosaic extra installs.
_EXTRA_OF = {"pygame": GAMES, "pandas": RESULTS, "pyarrow": RESULTS, "matplotlib": RESULTS,
             "psycopg": "postgres", "ray": "ray", "torch": "torch",
             "tensorboardX": TENSORBOARD, "mlflow": MLFLOW, "moviepy": VIDEO, "imageio": VIDEO,
             "imageio_ffmpeg": VIDEO, "chess": "chess", "minigrid": "minigrid",
             "PIL": IMAGES,
             # PettingZoo's SISL pursuit_v5 imports scipy (pygame too: the games extra).
             "scipy": "pursuit"}


def extra_for(module: str) -> str | None:
    """The mosaic extra that installs the top-level package of ``module``, if one does."""
    return _EXTRA_OF.get(module.partition(".")[0])


def require(module: str, purpose: str, extra: str = RESULTS) -> ModuleType:
    """Import ``module``, or raise MissingExtra naming ``extra`` and what it was needed for.

    ``purpose`` completes "<purpose> needs <package>", as in ``"a DataFrame of episodes"``.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingExtra(module.partition(".")[0], extra, purpose) from exc
