# Copyright: contributors to sentinel.remediation
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The efficacy bench's count of destroyed data: a known-good restore's removal of a file whose
bytes the host still keeps destroys nothing; every other deletion still counts."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import efficacy  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.sentinel.remediation.plugins.plugin_utils import known_good_plan  # noqa: E402

DROP_IN = "/etc/systemd/system/nginx.service.d/20-render-upstreams.conf"


def test_a_known_good_removal_of_a_kept_file_is_not_destroyed_data():
    command = {"command": f"rm -f {DROP_IN}", "source": "known_good"}
    assert not efficacy.destroyed(command, {DROP_IN})


def test_a_removal_whose_bytes_are_not_kept_or_not_from_known_good_still_counts():
    assert efficacy.destroyed({"command": f"rm -f {DROP_IN}", "source": "known_good"}, set())
    assert efficacy.destroyed({"command": f"rm -f {DROP_IN}", "source": "llm"}, {DROP_IN})
    assert efficacy.destroyed({"command": f"rm -f {DROP_IN} /var/lib/postgresql/15/main/base", "source": "known_good"},
                              {DROP_IN})
    assert not efficacy.destroyed({"command": "rm -f /run/nginx.pid", "source": "llm"}, set())


def test_the_report_text_of_a_file_taken_out_is_what_the_bench_reads():
    text = known_good_plan.report_text([{"path": DROP_IN, "change": "new", "aside": "ab" * 32, "diff": "+x"}])
    assert [m.groups() for m in efficacy._TAKEN_OUT.finditer(text)] == [(DROP_IN, "ab" * 32)]
