"""Device profiles of simulated nodes: the shared definitions in :mod:`kube.dra.deviceprofiles`
(the scheduler's what-if questions read the same profiles)."""

from __future__ import annotations

from kube.dra.deviceprofiles import (
    MAX_ADVANCED_DEVICES_PER_SLICE,
    MAX_COUNTER_SETS_PER_SLICE,
    MAX_DEVICES_PER_SLICE,
    NO_PROFILE,
    PROFILE_DIR,
    DriverProfile,
    Profile,
    ProfileError,
    available_profiles,
    build_pool_slices,
    build_slices,
    device_names,
    load_profile,
    load_profiles,
    parse_profile,
    render_counter_sets,
    render_devices,
    render_string,
    slice_name,
    without_device_field,
)

__all__ = [
    "MAX_ADVANCED_DEVICES_PER_SLICE", "MAX_COUNTER_SETS_PER_SLICE", "MAX_DEVICES_PER_SLICE", "NO_PROFILE", "PROFILE_DIR",
    "DriverProfile", "Profile", "ProfileError", "available_profiles", "build_pool_slices", "build_slices", "device_names",
    "load_profile", "load_profiles", "parse_profile", "render_counter_sets", "render_devices", "render_string", "slice_name",
    "without_device_field",
]  # fmt: skip
