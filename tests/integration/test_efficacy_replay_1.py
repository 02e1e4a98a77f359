# Copyright (c) sentinel.remediation contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The efficacy replay, shard 1 of 2 (tests/integration/efficacy_replay.py says what is replayed and checked)."""
# The shard's fixture and tests, imported to be collected here (pytest finds them by name).
# pylint: disable=unused-import
from efficacy_replay import (  # noqa: F401
    pytestmark, replayed, test_every_fault_was_prepared_and_answered_from_the_recording,
    test_nothing_destructive_ran_and_no_plan_ran_twice, test_the_fixable_faults_heal_as_recorded,
    test_the_human_only_faults_are_held)

SHARD = (1, 2)
