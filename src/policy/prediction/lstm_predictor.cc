#include "policy/prediction/lstm_predictor.h"

#include <torch/torch.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace maitre::policy {
namespace {

struct NetImpl : torch::nn::Module {
  NetImpl(int hidden)
      : lstm(register_module("lstm",
                             torch::nn::LSTM(torch::nn::LSTMOptions(1, hidden).batch_first(true)))),
        head(register_module("head", torch::nn::Linear(hidden, 1))) {}

  // [batch, lookback, 1] -> [batch, 1]: the next unit's scaled peak.
  torch::Tensor forward(const torch::Tensor& windows) {
    auto out = std::get<0>(lstm->forward(windows));
    return head->forward(out.select(1, out.size(1) - 1));
  }

  torch::nn::LSTM lstm;
  torch::nn::Linear head;
};
TORCH_MODULE(Net);

class LstmPredictor final : public WorkloadPredictor {
 public:
  explicit LstmPredictor(const LstmPredictorOptions& o) : o_(o) {}

  std::vector<double> Predict(absl::Span<const double> history, int horizon) override {
    const int n = static_cast<int>(history.size());
    if (n < o_.lookback + 1) {
      return LastValuePredictor().Predict(history, horizon);
    }
    torch::NoGradGuard no_grad_outside_training;
    if (!net_ || n - trained_at_ >= o_.retrain_every) Train(history);
    // Iterated one-step forecasts: each prediction joins the window.
    std::vector<float> window(static_cast<size_t>(o_.lookback));
    for (int i = 0; i < o_.lookback; ++i) {
      window[static_cast<size_t>(i)] =
          static_cast<float>(history[static_cast<size_t>(n - o_.lookback + i)] / scale_);
    }
    std::vector<double> forecast;
    forecast.reserve(static_cast<size_t>(horizon));
    net_->eval();
    for (int h = 0; h < horizon; ++h) {
      torch::Tensor input = torch::from_blob(window.data(), {1, o_.lookback, 1}).clone();
      const float next = std::max(0.0f, net_->forward(input).item<float>());
      forecast.push_back(next * scale_);
      window.erase(window.begin());
      window.push_back(next);
    }
    return forecast;
  }

 private:
  void Train(absl::Span<const double> history) {
    torch::set_num_threads(1);  // reproducible, and the host's cores are for serving
    torch::manual_seed(o_.seed);
    const int n = static_cast<int>(history.size());
    scale_ = std::max(1e-9, *std::max_element(history.begin(), history.end()));
    const int windows = std::min(o_.max_windows, n - o_.lookback);
    std::vector<float> inputs, targets;
    inputs.reserve(static_cast<size_t>(windows * o_.lookback));
    for (int w = n - o_.lookback - windows; w < n - o_.lookback; ++w) {
      for (int i = 0; i < o_.lookback; ++i) {
        inputs.push_back(static_cast<float>(history[static_cast<size_t>(w + i)] / scale_));
      }
      targets.push_back(static_cast<float>(history[static_cast<size_t>(w + o_.lookback)] / scale_));
    }
    torch::Tensor x = torch::from_blob(inputs.data(), {windows, o_.lookback, 1}).clone();
    torch::Tensor y = torch::from_blob(targets.data(), {windows, 1}).clone();
    // Each training starts from the last one's weights: the history only grew.
    if (!net_) net_ = Net(o_.hidden);
    net_->train();
    torch::optim::Adam optimiser(net_->parameters(), torch::optim::AdamOptions(o_.learning_rate));
    torch::AutoGradMode grad(true);
    for (int epoch = 0; epoch < o_.epochs; ++epoch) {
      optimiser.zero_grad();
      torch::Tensor loss = torch::mse_loss(net_->forward(x), y);
      loss.backward();
      optimiser.step();
    }
    trained_at_ = n;
  }

  const LstmPredictorOptions o_;
  Net net_{nullptr};
  int trained_at_ = 0;
  double scale_ = 1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WorkloadPredictor>> CreateLstmPredictor(
    const LstmPredictorOptions& o) {
  if (o.lookback < 1 || o.hidden < 1 || o.retrain_every < 1 || o.max_windows < 1 ||
      o.epochs < 1 || !(o.learning_rate > 0)) {
    return absl::InvalidArgumentError(
        "the LSTM predictor's lookback, width, retraining interval, windows and epochs must be "
        "at least 1, and its learning rate positive");
  }
  return std::make_unique<LstmPredictor>(o);
}

}  // namespace maitre::policy
