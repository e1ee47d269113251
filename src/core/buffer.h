// A 64-byte aligned, zero-initialised array that owns its memory: the backing store of parameter,
// gradient, optimizer and activation arenas. Sized once; never grows behind the caller's back.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

namespace gmlp {

template <class T>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t n) { resize(n); }

  void resize(size_t n) {
    if (n == 0) {
      data_.reset();
      size_ = 0;
      return;
    }
    // Large arrays on 2 MB pages where the kernel has them (transparent huge pages): the
    // token-major activations are read row by row a batch of rows apart, each row on a page of
    // its own at 4 KB pages, so every row read missed the TLB.
    const size_t huge = size_t(2) << 20, align = n * sizeof(T) >= huge ? huge : 64;
    const size_t bytes = (n * sizeof(T) + align - 1) / align * align;
    void* p = std::aligned_alloc(align, bytes);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    if (align == huge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    std::memset(p, 0, bytes);
    data_.reset(static_cast<T*>(p));
    size_ = n;
  }
  void zero() {
    if (size_) std::memset(data_.get(), 0, size_ * sizeof(T));
  }

  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_.get()[i]; }
  const T& operator[](size_t i) const { return data_.get()[i]; }

 private:
  struct Free {
    void operator()(T* p) const { std::free(p); }
  };
  std::unique_ptr<T, Free> data_;
  size_t size_ = 0;
};

}  // namespace gmlp
