// The first initialisation of the npu backend from Python (torch_npu.npu's
// lazy init). Layer: binding.
//
// Note [Configuration is validated at initialisation]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every environment variable the backend reads is checked when the backend
// initialises (the lazy init that torch.npu._lazy_init, the first tensor on an
// npu device, and the first stream or event use run), not when the variable
// is first needed: TORCH_NPU_EXTERNAL_STREAM_MODE is otherwise read at the
// first external-stream check, TASK_QUEUE_ENABLE at the first launch, the
// pool size at the first pool stream, which can be long after start-up and
// far from the cause. The checks themselves stay with the code that reads each
// variable (npurt's loadConfig, queue::config, external::mode,
// streamsPerPool); initialisation only forces them, in that order, and a
// failure leaves the backend uninitialised so that the next use raises again.
#pragma once

namespace c10_npu::python {

// Validates the configuration and starts the runtime; raises a c10::Error
// naming the first bad variable, its value and the accepted values
// (STREAMS_PER_DEVICE only warns, as torch_npu does). Thread-safe; cheap
// once it succeeded (one atomic load). Call with the GIL held, inside
// HANDLE_TH_ERRORS, so that the STREAMS_PER_DEVICE warning reaches Python.
void initializeSlow();
bool initialized() noexcept;

inline void ensureInitialized() {
  if (!initialized()) initializeSlow();
}

}  // namespace c10_npu::python
