"""loaderx_rs: the Python API of the loaderx record store and data loader.

The API is the extension module `loaderx_rs.loaderx_rs` (python/src),
re-exported here under `loaderx_rs`. Python-only submodules sit beside this
file and are imported on demand (`import loaderx_rs.ray`): importing
`loaderx_rs` imports no optional dependency."""

from .loaderx_rs import *  # noqa: F401,F403
from .loaderx_rs import __all__, __doc__  # noqa: F401
