# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cache plugin sentinel.remediation.jsonfile: ansible's jsonfile, made safe for memory."""
from __future__ import annotations

DOCUMENTATION = r"""
name: jsonfile
short_description: JSON files per host that never lose a good entry
version_added: 0.1.0
author: Sentinel Remediation maintainers (@sentinel-remediation)
description:
  - The same files as C(ansible.builtin.jsonfile) (one JSON file per host, readable by it), written
    so that the remediation memory (C(sentinel_memory)) is never lost silently.
  - A write goes to a temporary file in the same directory, is flushed to disk, and replaces the
    entry only when it was written completely. When the disk is full or the directory read-only,
    the previous good entry stays, the error is shown, and the remediation report lists it
    (the built-in plugin renames a partial or empty file over the good one).
  - A corrupt entry is moved aside to C(<file>.corrupt-<time>) (a copy is always kept) and that host
    starts with no cached facts, instead of the whole run stopping.
options:
  _uri:
    required: true
    description: Directory of the JSON files.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_CONNECTION
    ini:
      - key: fact_caching_connection
        section: defaults
    type: path
  _prefix:
    description: Prefix of the file names.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_PREFIX
    ini:
      - key: fact_caching_prefix
        section: defaults
  _timeout:
    default: 86400
    description: Seconds an entry stays valid (0 never expires).
    env:
      - name: ANSIBLE_CACHE_PLUGIN_TIMEOUT
    ini:
      - key: fact_caching_timeout
        section: defaults
    type: integer
"""

import json
import os
import re
import shutil
import tempfile
import time

from ansible.errors import AnsibleError
from ansible.plugins.cache import BaseFileCacheModule
from ansible.utils.display import Display

display = Display()
_NAME = "sentinel.remediation.jsonfile"
# Failed writes of this process, read by the remediation report callback: [{host, file, error}].
WRITE_FAILURES: list[dict] = []


def _host_of(key: str) -> str:
    """The inventory host of a cache key (ansible-core prefixes keys with its schema, ``s1_``)."""
    match = re.match(r"^s\d+_(.+)$", key)
    return match.group(1) if match else key


class CacheModule(BaseFileCacheModule):
    """Per-host JSON files; complete writes only, corrupt entries kept aside."""

    def validate_cache_connection(self):
        # ansible-core turns the cache off (one warning, every host's memory forgotten) when
        # the directory cannot be written. A directory that can still be read (a read-only
        # mount, a full disk's permissions) keeps serving the memory; each write then fails
        # in set(), and the report says which host's memory was not saved.
        try:
            super().validate_cache_connection()
        except AnsibleError:
            directory = self._cache_dir
            if not (directory and os.path.isdir(directory) and os.access(directory, os.R_OK | os.X_OK)):
                raise
            display.warning(f"{_NAME}: the fact cache directory {directory} cannot be written; memory is read "
                            "from it, and the report names each host whose new memory is not saved")

    def _load(self, filepath: str) -> object:
        with open(filepath, encoding="utf-8") as handle:
            return json.load(handle)

    def _dump(self, value: object, filepath: str) -> None:
        with open(filepath, "w", encoding="utf-8") as handle:
            json.dump(value, handle)

    def get(self, key):
        # The base class deletes a corrupt file and stops the run; here it is moved aside (a
        # copy kept) and the host simply has no cached facts.
        if key not in self._cache:
            if key == "" or self.has_expired(key):
                raise KeyError(key)
            try:
                self._cache[key] = self._load_or_move_aside(key)
            except FileNotFoundError:
                raise KeyError(key) from None
        return self._cache.get(key)

    def _load_or_move_aside(self, key):
        cachefile = self._get_cache_file_name(key)
        try:
            return self._load(cachefile)
        except FileNotFoundError:
            raise
        except (ValueError, UnicodeDecodeError, OSError) as exc:
            copy = f"{cachefile}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}"
            try:
                shutil.move(cachefile, copy)
            except OSError as move_error:
                display.warning(f"{_NAME}: the cache entry {cachefile} is unreadable ({exc}) and could not be "
                                f"moved aside ({move_error}); {key} starts with no cached facts")
            else:
                display.warning(f"{_NAME}: the cache entry {cachefile} was corrupt ({exc}); kept as {copy}, "
                                f"{_host_of(key)} starts with no cached facts")
            raise FileNotFoundError(cachefile) from exc

    def set(self, key, value):
        self._cache[key] = value
        cachefile = self._get_cache_file_name(key)
        directory = os.path.dirname(cachefile)
        tmp = None
        try:
            handle, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(cachefile)}.")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(value, out)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            os.replace(tmp, cachefile)
            tmp = None
        except (OSError, TypeError, ValueError) as exc:
            host = _host_of(key)
            WRITE_FAILURES.append({"host": host, "file": cachefile, "error": str(exc)})
            display.error(f"{_NAME}: could not save the facts of {host} to {cachefile}: {exc}; the previous "
                          "entry is kept (this run's new memory of that host is lost)")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
