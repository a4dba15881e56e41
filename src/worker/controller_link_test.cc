#include "worker/controller_link.h"

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "core/sha256.h"

namespace maitre::worker {
namespace {

constexpr char kSession[] = "session-token-of-the-test";
constexpr char kBlob[] = "the bytes of a model";

// A controller's membership service in miniature. Its answer to a
// registration waits until a blob fetch has arrived (or a short while has
// passed), so a worker that fetched before reading that answer is caught:
// the fetch reaches the service without the session token.
class SlowToAnswerMembership final : public v1::Membership::Service {
 public:
  grpc::Status RegisterWorker(grpc::ServerContext*, const v1::RegisterWorkerRequest*,
                              v1::RegisterWorkerResponse* response) override {
    registering_.Notify();
    fetch_arrived_.WaitForNotificationWithTimeout(absl::Milliseconds(300));
    response->set_worker_id("w1");
    response->set_session_token(kSession);
    return grpc::Status::OK;
  }
  grpc::Status FetchBlob(grpc::ServerContext* context, const v1::FetchBlobRequest* request,
                         grpc::ServerWriter<v1::BlobChunk>* writer) override {
    if (!fetch_arrived_.HasBeenNotified()) fetch_arrived_.Notify();
    auto it = context->client_metadata().find(kAuthorizationHeader);
    const bool carries_session =
        it != context->client_metadata().end() &&
        BearerToken(absl::string_view(it->second.data(), it->second.size())) == kSession;
    if (!carries_session || request->worker_id() != "w1") {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "no session");
    }
    v1::BlobChunk chunk;
    chunk.set_total_size(sizeof(kBlob) - 1);
    chunk.set_data(kBlob);
    writer->Write(chunk);
    return grpc::Status::OK;
  }

  absl::Notification registering_;

 private:
  absl::Notification fetch_arrived_;
};

TEST(ControllerLinkTest, AFetchDuringRegistrationWaitsForTheSession) {
  SlowToAnswerMembership service;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  ControllerLink::Options options;
  options.controller = absl::StrCat("127.0.0.1:", port);
  options.worker_type = "cpu-1";
  options.join_token = "join";
  options.call_token = "a call token of sixteen bytes or more";
  ControllerLink link(options);

  StopSignal stop;
  absl::StatusOr<Registration> registration;
  std::thread registering(
      [&] { registration = link.Register("127.0.0.1:1", 60 * kSecond, &stop); });
  // The controller has the registration (and may already send a load) but
  // has not answered it: the load's fetch starts now.
  service.registering_.WaitForNotification();
  const std::string path =
      (std::filesystem::temp_directory_path() / absl::StrCat("link-test-", getpid())).string();
  absl::Status fetched = link.Fetch(Sha256Hex(kBlob), path);
  registering.join();

  ASSERT_TRUE(registration.ok()) << registration.status();
  EXPECT_TRUE(fetched.ok()) << fetched;
  auto bytes = ReadFileToString(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, kBlob);
  std::filesystem::remove(path);
  server->Shutdown();
}

}  // namespace
}  // namespace maitre::worker
