// The LSTM workload predictor (MArk, §4.2: "a vanilla version of long
// short-term memory (LSTM) network for multi-step workload prediction";
// docs/policies.md, "Workload prediction"). A one-layer LSTM reads the last
// `lookback` unit peaks and predicts the next; multi-step forecasts feed
// each prediction back in. It is trained with libtorch on the history as it
// grows: first once `lookback` + 1 units exist, then again every
// `retrain_every` new units, on the most recent windows. Until then it holds
// the last value. Peaks are scaled by the largest seen, so one network fits
// any rate. Training is seeded and single-threaded, so a run is
// reproducible.
//
// Its own library (maitre_policy_lstm) keeps torch out of everything else.
//
// Thread-safety: not synchronised; one owner.
#pragma once

#include <memory>

#include "policy/prediction/workload_prediction.h"

namespace maitre::policy {

struct LstmPredictorOptions {
  int lookback = 30;        // units the network reads
  int hidden = 32;          // LSTM width
  int retrain_every = 10;   // units between trainings
  int max_windows = 512;    // most recent training windows used
  int epochs = 60;          // full-batch Adam steps per training
  double learning_rate = 0.01;
  uint64_t seed = 1;
};

absl::StatusOr<std::unique_ptr<WorkloadPredictor>> CreateLstmPredictor(
    const LstmPredictorOptions& options);

}  // namespace maitre::policy
