// Running a program as a child process and reading what it printed: for the
// example programs (tests/examples/) and for what only a fresh process shows
// (start-up, once-per-process behaviour: tests/core/startup_test.cpp).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dtr::testing {

struct Output {
  int exit_code = -1;
  std::string out, err;
  std::string all() const { return "--- stdout:\n" + out + "--- stderr:\n" + err; }
};

inline std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A fresh empty folder under the system's temp folder, removed at scope exit.
struct TempDir {
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dtr_test_XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path path;
};

/// The program `name` in the build folder `folder` (a sibling of the folder
/// of this test binary: build/tests/../<folder>/), or nullopt when it was not
/// built.
inline std::optional<std::filesystem::path> built_program(const std::string& folder,
                                                          const std::string& name) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const std::filesystem::path p = self.parent_path().parent_path() / folder / name;
  if (access(p.c_str(), X_OK) != 0) return std::nullopt;
  return p;
}

/// Starts `exe args...` with stdout and stderr going to the files `out` and
/// `err`, and returns its process id (-1 when fork fails). The child's
/// environment is this process's without any DTR_* variable, plus `env`
/// (name, value pairs), so what the library reads is exactly `env`; SIGINT
/// and SIGTERM start at their default dispositions (a shell may have the
/// test ignore SIGINT).
inline pid_t spawn_child(const std::filesystem::path& exe, const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         const std::filesystem::path& out, const std::filesystem::path& err) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0) _exit(126);
    dup2(o, 1);
    dup2(e, 2);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    std::vector<std::string> dtr_names;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      if (std::strncmp(*entry, "DTR_", 4) != 0) continue;
      const char* eq = std::strchr(*entry, '=');
      dtr_names.emplace_back(*entry, eq != nullptr ? size_t(eq - *entry) : std::strlen(*entry));
    }
    for (const std::string& name : dtr_names) unsetenv(name.c_str());
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    std::string exe_s = exe.string();
    argv.push_back(exe_s.data());
    std::vector<std::string> copy = args;
    for (std::string& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(exe_s.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

/// Waits for the child `pid`: its exit code, 128 + the signal's number when
/// a signal ended it, -1 when it cannot be waited for.
inline int wait_child(pid_t pid) {
  int status = 0;
  if (pid <= 0 || waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Runs `exe args...` and waits for it, capturing stdout and stderr; the
/// environment as spawn_child makes it.
inline Output run_child(const std::filesystem::path& exe, const std::vector<std::string>& args,
                        const std::vector<std::pair<std::string, std::string>>& env = {}) {
  TempDir tmp;
  const std::filesystem::path out = tmp.path / "stdout", err = tmp.path / "stderr";
  Output r;
  r.exit_code = wait_child(spawn_child(exe, args, env, out, err));
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace dtr::testing
