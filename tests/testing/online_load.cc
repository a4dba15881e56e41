#include "testing/online_load.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "core/tensor.h"
#include "http/client.h"
#include "nlohmann/json.hpp"

namespace maitre::testing {

using nlohmann::json;

OnlineLoad::OnlineLoad(const std::string& url, const std::string& model, const Valset& valset,
                       int threads, int rows, absl::Duration pause) {
  Tensor images = *SliceRows(valset.inputs, 0, rows);
  std::string body = absl::StrCat(R"({"inputs":[{"name":"input","datatype":"FP32","shape":[)",
                                  rows, R"(,1,28,28],"data":[)");
  for (int64_t i = 0; i < images.NumElements(); ++i) {
    absl::StrAppend(&body, i == 0 ? "" : ",", images.As<float>()[i]);
  }
  body.append("]}]}");
  for (int t = 0; t < threads; ++t) {
    threads_.emplace_back([this, url, model, body, pause] {
      http::ClientOptions options;
      options.base_url = url;
      auto client = *http::Client::Create(options);
      while (!stop_.load()) {
        auto r = client->Send("POST", absl::StrCat("/v2/models/", model, "/infer"), body);
        if (r.ok() && r->status == 200) {
          served_.fetch_add(1);
          const json answer = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
          if (answer.is_object() && answer.contains("parameters") &&
              answer["parameters"].contains("worker") &&
              answer["parameters"]["worker"].is_string()) {
            absl::MutexLock lock(&mu_);
            ++served_by_[answer["parameters"]["worker"].get<std::string>()];
          }
          if (pause > absl::ZeroDuration()) absl::SleepFor(pause);
          continue;
        }
        failed_.fetch_add(1);
        absl::MutexLock lock(&mu_);
        if (first_failure_.empty()) {
          first_failure_ = r.ok() ? absl::StrCat(r->status, " ", r->body) : r.status().ToString();
        }
      }
    });
  }
}

void OnlineLoad::Stop() {
  stop_ = true;
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int64_t OnlineLoad::served_by(const std::string& worker) const {
  absl::MutexLock lock(&mu_);
  auto it = served_by_.find(worker);
  return it == served_by_.end() ? 0 : it->second;
}

std::string OnlineLoad::first_failure() const {
  absl::MutexLock lock(&mu_);
  return first_failure_;
}

}  // namespace maitre::testing
