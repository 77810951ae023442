/* The Ascend chip models a simulated device may report
 * (NPU_SIM_SOC_VERSION; Note [Simulated chip model] in src/config.cpp).
 *
 * NPURT_FOR_EACH_ASCEND_SOC(X) calls X(name, id) for each model torch_npu
 * knows (its NpuVariables), in torch_npu's order: `name` is the string CANN's
 * runtime reports (aclrtGetSocName), `id` a C identifier for it (torch_npu's
 * SocVersion enumerator). Every "Ascend950..." name is accepted too (torch_npu
 * treats them as one model). The one list of these names: npurt validates
 * the setting against it, the framework maps it to torch_npu's SocVersion.
 * Header only; no state. */
#ifndef NPURT_NPURT_SOC_NAMES_H_
#define NPURT_NPURT_SOC_NAMES_H_

#define NPURT_ASCEND950_PREFIX "Ascend950"

#define NPURT_FOR_EACH_ASCEND_SOC(X)        \
  X("Ascend910PremiumA", Ascend910PremiumA) \
  X("Ascend910ProA", Ascend910ProA)         \
  X("Ascend910A", Ascend910A)               \
  X("Ascend910ProB", Ascend910ProB)         \
  X("Ascend910B", Ascend910B)               \
  X("Ascend310P1", Ascend310P1)             \
  X("Ascend310P2", Ascend310P2)             \
  X("Ascend310P3", Ascend310P3)             \
  X("Ascend310P4", Ascend310P4)             \
  X("Ascend310P5", Ascend310P5)             \
  X("Ascend310P7", Ascend310P7)             \
  X("Ascend910B1", Ascend910B1)             \
  X("Ascend910B2", Ascend910B2)             \
  X("Ascend910B2C", Ascend910B2C)           \
  X("Ascend910B3", Ascend910B3)             \
  X("Ascend910B4", Ascend910B4)             \
  X("Ascend910B4-1", Ascend910B4_1)         \
  X("Ascend310B1", Ascend310B1)             \
  X("Ascend310B2", Ascend310B2)             \
  X("Ascend310B3", Ascend310B3)             \
  X("Ascend310B4", Ascend310B4)             \
  X("Ascend910_9391", Ascend910_9391)       \
  X("Ascend910_9392", Ascend910_9392)       \
  X("Ascend910_9381", Ascend910_9381)       \
  X("Ascend910_9382", Ascend910_9382)       \
  X("Ascend910_9372", Ascend910_9372)       \
  X("Ascend910_9362", Ascend910_9362)       \
  X("Ascend910_9363", Ascend910_9363)

#endif /* NPURT_NPURT_SOC_NAMES_H_ */
