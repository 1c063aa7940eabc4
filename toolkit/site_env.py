"""Settings the site build needs before mkdocs loads its theme.

`mkdocs.yml` names `QUIET` with a YAML `!!python/name:` tag, so this module is imported while
the configuration file is read, which is before the Material theme is loaded: the theme's
end-of-life banner (printed on import unless `NO_MKDOCS_2_WARNING` is set) then stays out of
every `mkdocs build` of this project, not only `make site`'s.
"""

from __future__ import annotations

import os

os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")

QUIET = True
"""What `mkdocs.yml`'s `extra.quiet_theme_banner` holds (the import is the point)."""
