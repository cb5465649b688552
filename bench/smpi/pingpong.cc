// Ping-pong between ranks 0 and 1: the one-way time and bandwidth per message size, for
// fitting SMPI's bandwidth and latency factors to a real link (fit_factors.py). The same
// source builds with Open MPI and with SimGrid:
//
//   mpicxx -O2 -std=c++17 pingpong.cc -o pingpong && mpirun -np 2 ./pingpong > real.csv
//   smpicxx -O2 -std=c++17 pingpong.cc -o pingpong_smpi && smpirun -np 2 ... ./pingpong_smpi > sim.csv
//
//   pingpong [--min BYTES] [--max BYTES] [--factor F] [--seconds S]
//
// Rank 0 prints CSV: bytes, one_way_s (half the median round trip), bytes_per_s, round_trips.
// Each size runs for about S seconds (default 0.2) after two round trips of warm-up. Under
// SimGrid run it with smpi/simulate-computation:no and smpi/async-small-thresh equal to
// smpi/send-is-detached-thresh (eager sends, as Open MPI's TCP transport below 64 KiB).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef SMPI_SHARED_MALLOC  // SimGrid: no real bytes to copy
#define BUFFER(n) SMPI_SHARED_MALLOC(n)
#define RELEASE(p) SMPI_SHARED_FREE(p)
#else
#define BUFFER(n) std::malloc(n)
#define RELEASE(p) std::free(p)
#endif

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  long min = 1, max = 64L << 20;
  double factor = 2, budget = 0.2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--min") min = std::atol(argv[i + 1]);
    else if (a == "--max") max = std::atol(argv[i + 1]);
    else if (a == "--factor") factor = std::atof(argv[i + 1]);
    else if (a == "--seconds") budget = std::atof(argv[i + 1]);
  }
  if (size < 2 || factor <= 1 || min < 1) {
    if (rank == 0) std::fprintf(stderr, "pingpong: needs 2 ranks, --factor > 1, --min >= 1\n");
    MPI_Finalize();
    return 2;
  }
  char* buf = static_cast<char*>(BUFFER(static_cast<size_t>(max)));
  std::memset(buf, 1, static_cast<size_t>(std::min(max, 1L << 20)));
  if (rank == 0) std::printf("bytes,one_way_s,bytes_per_s,round_trips\n");
  for (double s = static_cast<double>(min); s <= static_cast<double>(max); s *= factor) {
    const int n = static_cast<int>(s);
    // Two round trips warm up and tell rank 0 how many fit the budget; it tells rank 1 (so
    // that no collective sits between the timed round trips).
    auto trip = [&]() {
      if (rank == 0) {
        const double t0 = MPI_Wtime();
        MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return MPI_Wtime() - t0;
      }
      if (rank == 1) {
        MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
      return 0.0;
    };
    trip();
    int count = static_cast<int>(std::min(100000.0, std::max(5.0, budget / std::max(trip(), 1e-9))));
    MPI_Bcast(&count, 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<double> trips;
    for (int k = 0; k < count; ++k) trips.push_back(trip());
    if (rank == 0) {
      std::sort(trips.begin(), trips.end());
      const double one_way = trips[trips.size() / 2] / 2;
      std::printf("%d,%.9g,%.6g,%zu\n", n, one_way, n / one_way, trips.size());
      std::fflush(stdout);
    }
  }
  RELEASE(buf);
  MPI_Finalize();
  return 0;
}
