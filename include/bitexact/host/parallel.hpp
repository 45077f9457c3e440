// Independent pieces of work on the host's cores: the emulators' heads, row
// slabs and output tiles. Which thread takes which piece changes no result,
// since each piece writes outputs of its own.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace bitexact {

// A thread count as the emulators take it: 0 means one per core.
inline unsigned threads_or_cores(unsigned threads) {
  return threads != 0 ? threads : std::max(1u, std::thread::hardware_concurrency());
}

// Runs work(i) for every i in [0, count) on up to `threads` threads (0: one
// per core), taking the next i as each finishes; the first exception thrown
// stops the others from taking more and is rethrown here.
template <class Work>
void for_each_index(std::size_t count, unsigned threads, Work&& work) {
  threads = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(threads_or_cores(threads), count)));
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_lock;
  const auto worker = [&] {
    try {
      for (std::size_t i = next++; i < count; i = next++) work(i);
    } catch (...) {
      const std::lock_guard<std::mutex> hold(failure_lock);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
  if (failure) std::rethrow_exception(failure);
}

// Threads shared out between `items` independent items (heads) and the
// pieces each is cut into (a head's row slabs): a thread an item while there
// are as many items as threads, and the threads left over to each item's
// pieces, so that one long head still takes every core.
struct thread_split {
  unsigned items = 1;   // threads taking the items
  unsigned pieces = 1;  // threads taking the pieces of one item
};

inline thread_split split_threads(std::size_t items, unsigned threads) {
  const unsigned total = threads_or_cores(threads);
  const auto across = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(total, items)));
  return {across, std::max(1u, total / across)};
}

}  // namespace bitexact
