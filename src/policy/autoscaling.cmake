# Autoscaling, placement and provisioning policies (INFaaS; the infaas-table3
# experiment). Pure policies in maitre_policy_autoscaling; the CBC
# reference ILP in its own library so that only its users link CBC.

maitre_library(maitre_policy_autoscaling
  SRCS autoscaling_model.cc autoscaling_model_snapshot.cc autoscaling_consolidation.cc autoscaling_cluster.cc placement.cc
       provisioning.cc migration.cc mark_provisioning.cc
  DEPS maitre_core maitre_selection absl::status absl::statusor absl::strings absl::str_format
       absl::span)

maitre_library(maitre_policy_autoscaling_ilp
  SRCS autoscaling_ilp.cc
  DEPS maitre_policy_autoscaling PkgConfig::CBC)

maitre_test(autoscaling_test
  SRCS autoscaling_model_test.cc autoscaling_model_property_test.cc autoscaling_consolidation_test.cc
       autoscaling_model_capacity_test.cc
       autoscaling_ilp_test.cc
       autoscaling_cluster_test.cc placement_test.cc provisioning_test.cc migration_test.cc
       mark_provisioning_test.cc
  DEPS maitre_policy_autoscaling maitre_policy_autoscaling_ilp)

maitre_bench(autoscaling_bench
  SRCS autoscaling_bench.cc
  DEPS maitre_policy_autoscaling maitre_policy_autoscaling_ilp)

# INFaaS Table 3 (examples/experiments/infaas-table3/run calls it).
add_executable(infaas_table3 provisioning_table3_main.cc)
target_link_libraries(infaas_table3 PRIVATE maitre_policy_autoscaling nlohmann_json::nlohmann_json)
target_include_directories(infaas_table3 PRIVATE ${PROJECT_SOURCE_DIR}/src)

# Proteus's allocation MILP (CBC), with its own library for the same reason.
maitre_library(maitre_policy_allocation
  SRCS allocation_milp.cc allocation_infaas.cc
  DEPS maitre_core absl::status absl::statusor absl::strings PkgConfig::CBC)

maitre_test(allocation_test
  SRCS allocation_milp_test.cc allocation_infaas_test.cc
  DEPS maitre_policy_allocation)

maitre_bench(allocation_bench
  SRCS allocation_bench.cc
  DEPS maitre_policy_allocation)
