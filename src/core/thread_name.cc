#include "core/thread_name.h"

#include <pthread.h>

namespace maitre {

void NameThisThread(absl::string_view name) {
  std::string cut(name.substr(0, 15));
  pthread_setname_np(pthread_self(), cut.c_str());
}

std::string ThisThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

}  // namespace maitre
