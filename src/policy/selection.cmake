# Selection and instance-state policies (model-less queries).
maitre_library(maitre_selection
  SRCS instance_state.cc selection_index.cc selection_live.cc selection.cc
       selection_reference.cc selection_weighted.cc job_throttle.cc
  DEPS maitre_core absl::flat_hash_map absl::inlined_vector absl::span absl::status
       absl::statusor absl::strings absl::str_format)

maitre_test(selection_test
  SRCS instance_state_test.cc selection_index_test.cc selection_live_test.cc selection_test.cc
       selection_property_test.cc selection_weighted_test.cc
       selection_capacity_test.cc
  DEPS maitre_selection)

maitre_bench(selection_bench
  SRCS selection_bench.cc
  DEPS maitre_selection)
