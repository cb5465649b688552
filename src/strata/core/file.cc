#include "strata/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace strata {
namespace {

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string name, int fd) : name_(std::move(name)), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  const std::string& name() const override { return name_; }

  Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoError("read", name_, errno);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

  Result<uint64_t> Size() const override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return ErrnoError("stat", name_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

 private:
  std::string name_;
  int fd_;
};

class MemoryFile final : public RandomAccessFile {
 public:
  MemoryFile(std::string name, std::string contents) : name_(std::move(name)), data_(std::move(contents)) {}
  const std::string& name() const override { return name_; }
  Result<size_t> Read(uint64_t offset, size_t n, char* scratch) const override {
    if (offset >= data_.size()) return size_t{0};
    size_t k = std::min<uint64_t>(n, data_.size() - offset);
    std::memcpy(scratch, data_.data() + offset, k);
    return k;
  }
  Result<uint64_t> Size() const override { return static_cast<uint64_t>(data_.size()); }

 private:
  std::string name_;
  std::string data_;
};

Status WriteAll(int fd, const char* p, size_t n, const std::string& name) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", name, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return Status::OK();
}

// Buffered POSIX writer. With `temp_path` set it is the atomic writer: it writes to
// temp_path and renames onto `name` in Close().
class PosixWritableFile final : public WritableFile {
 public:
  static constexpr size_t kBufferSize = 1 << 16;

  PosixWritableFile(std::string name, std::string temp_path, int fd)
      : name_(std::move(name)), temp_path_(std::move(temp_path)), fd_(fd) {
    buffer_.reserve(kBufferSize);
  }
  ~PosixWritableFile() override {
    if (fd_ >= 0) {
      ::close(fd_);
      if (!temp_path_.empty()) ::unlink(temp_path_.c_str());  // never closed: leave nothing behind
    }
  }
  const std::string& name() const override { return name_; }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return Internal("append to closed file " + name_);
    if (buffer_.size() + data.size() > kBufferSize) {
      STRATA_RETURN_IF_ERROR(Flush());
      if (data.size() > kBufferSize) return WriteAll(fd_, data.data(), data.size(), name_);
    }
    buffer_.append(data);
    return Status::OK();
  }

  Status Flush() override {
    if (fd_ < 0) return Internal("flush of closed file " + name_);
    Status s = WriteAll(fd_, buffer_.data(), buffer_.size(), name_);
    buffer_.clear();
    return s;
  }

  Status Close() override {
    if (fd_ < 0) return Status::OK();
    Status s = Flush();
    if (s.ok() && ::fsync(fd_) != 0) s = ErrnoError("fsync", name_, errno);
    if (!s.ok()) return s;  // the destructor removes the temporary
    if (::close(fd_) != 0) {
      fd_ = -1;
      if (!temp_path_.empty()) ::unlink(temp_path_.c_str());
      return ErrnoError("close", name_, errno);
    }
    fd_ = -1;
    if (temp_path_.empty()) return Status::OK();
    if (::rename(temp_path_.c_str(), name_.c_str()) != 0) {
      int e = errno;
      ::unlink(temp_path_.c_str());
      return ErrnoError("rename into place", name_, e);
    }
    // Make the rename itself durable.
    std::string dir = name_.find('/') == std::string::npos ? "." : name_.substr(0, name_.rfind('/'));
    if (dir.empty()) dir = "/";
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
    return Status::OK();
  }

 private:
  std::string name_;
  std::string temp_path_;
  int fd_;
  std::string buffer_;
};

}  // namespace

Result<std::unique_ptr<RandomAccessFile>> OpenRandomAccessFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return InvalidArgument("open " + path + ": is a directory");
  }
  return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, fd));
}

std::unique_ptr<RandomAccessFile> NewMemoryFile(std::string name, std::string contents) {
  return std::make_unique<MemoryFile>(std::move(name), std::move(contents));
}

Result<std::unique_ptr<WritableFile>> NewAtomicWritableFile(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  std::string temp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", temp, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, temp, fd));
}

Result<std::unique_ptr<WritableFile>> NewAppendingFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", path, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, "", fd));
}

Result<std::string> ReadFileToString(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(auto file, OpenRandomAccessFile(path));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::string s(size, '\0');
  STRATA_ASSIGN_OR_RETURN(size_t n, file->Read(0, size, s.data()));
  s.resize(n);
  return s;
}

Status WriteFileAtomic(const std::string& path, std::string_view contents) {
  STRATA_ASSIGN_OR_RETURN(auto f, NewAtomicWritableFile(path));
  STRATA_RETURN_IF_ERROR(f->Append(contents));
  return f->Close();
}

}  // namespace strata
