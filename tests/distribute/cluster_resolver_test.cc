// ClusterResolver: the launch environment (OpenMPI, MPICH, Slurm, STRATA_CLUSTER) and its
// checks; host descriptions as workers exchange them.
#include "strata/distribute/cluster_resolver.h"

#include <gtest/gtest.h>

#include "strata/core/cpu.h"

namespace strata::distribute {
namespace {

using Vars = std::vector<std::pair<std::string, std::string>>;

TEST(ClusterResolver, NoLauncherIsOneLocalWorker) {
  auto r = ClusterResolver::FromVariables({}, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->environment().source, "local");
  EXPECT_EQ(r->environment().num_workers, 1);
  EXPECT_FALSE(r->environment().launched_under_mpi);
  EXPECT_EQ(r->cluster_spec().hosts, 1);
  EXPECT_EQ(r->replicas_per_worker(), UsableCores());
  ASSERT_TRUE(r->connect().ok());
  ASSERT_TRUE(r->initialize().ok());
  EXPECT_EQ(r->collective(), nullptr);
}

TEST(ClusterResolver, ReadsOpenMpiMpichAndSlurm) {
  auto ompi = ClusterResolver::FromVariables(
      {{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}, {});
  ASSERT_TRUE(ompi.ok()) << ompi.status().ToString();
  EXPECT_EQ(ompi->environment().source, "OpenMPI");
  EXPECT_EQ(ompi->environment().num_workers, 4);
  EXPECT_EQ(ompi->environment().worker_index, 3);
  EXPECT_TRUE(ompi->environment().launched_under_mpi);
  EXPECT_EQ(ompi->environment().local_worker_index, 1);  // its replicas pin after worker 0's

  auto mpich = ClusterResolver::FromVariables({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}}, {.replicas = 3});
  ASSERT_TRUE(mpich.ok());
  EXPECT_EQ(mpich->environment().source, "MPICH");
  EXPECT_EQ(mpich->environment().worker_index, 1);
  EXPECT_EQ(mpich->replicas_per_worker(), 3);

  auto slurm = ClusterResolver::FromVariables(
      {{"SLURM_NTASKS", "5"}, {"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "cn[08-10,12],login1"}}, {});
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->environment().source, "Slurm");
  EXPECT_EQ(slurm->environment().num_workers, 5);
  EXPECT_EQ(slurm->environment().worker_hosts, (std::vector<std::string>{"cn08", "cn09", "cn10", "cn12", "login1"}));

  // sbatch's environment without srun is not a launch: one local worker.
  auto batch = ClusterResolver::FromVariables({{"SLURM_NTASKS", "5"}, {"SLURM_PROCID", "0"}}, {});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(batch->environment().num_workers, 1);

  auto bad = ClusterResolver::FromVariables({{"OMPI_COMM_WORLD_SIZE", "four"}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("OMPI_COMM_WORLD_SIZE='four'"), std::string::npos) << bad.status().ToString();
}

TEST(ClusterResolver, StrataClusterSpecIsReadAndCheckedAgainstTheLauncher) {
  const std::string spec =
      R"({"cluster": {"worker": ["node1", "node2"]}, "task": {"type": "worker", "index": 1}, "replicas_per_worker": 2})";
  auto alone = ClusterResolver::FromVariables({{"STRATA_CLUSTER", spec}}, {});
  ASSERT_TRUE(alone.ok()) << alone.status().ToString();
  EXPECT_EQ(alone->environment().source, "STRATA_CLUSTER");
  EXPECT_EQ(alone->environment().num_workers, 2);
  EXPECT_EQ(alone->environment().worker_index, 1);
  EXPECT_EQ(alone->replicas_per_worker(), 2);
  EXPECT_EQ(alone->environment().worker_hosts, (std::vector<std::string>{"node1", "node2"}));
  // Two workers but no launcher: connect() says how to launch, it does not hang.
  Status s = alone->connect();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("mpirun -np 2"), std::string::npos) << s.ToString();

  auto agree = ClusterResolver::FromVariables(
      {{"STRATA_CLUSTER", spec}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}}, {});
  ASSERT_TRUE(agree.ok()) << agree.status().ToString();
  EXPECT_EQ(agree->environment().source, "OpenMPI + STRATA_CLUSTER");

  auto count = ClusterResolver::FromVariables(
      {{"STRATA_CLUSTER", spec}, {"OMPI_COMM_WORLD_SIZE", "3"}, {"OMPI_COMM_WORLD_RANK", "1"}}, {});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("lists 2 workers but OpenMPI started 3"), std::string::npos)
      << count.status().ToString();
  auto index = ClusterResolver::FromVariables(
      {{"STRATA_CLUSTER", spec}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}}, {});
  ASSERT_FALSE(index.ok());
  EXPECT_NE(index.status().message().find("task.index is 1"), std::string::npos) << index.status().ToString();

  for (const std::string& broken : {std::string("not json"), std::string(R"({"cluster": {}})"),
                                    std::string(R"({"cluster": {"worker": ["a"]}, "task": {"index": 3}})"),
                                    std::string(R"({"cluster": {"worker": ["a"]}, "replicas_per_worker": 0})")}) {
    auto r = ClusterResolver::FromVariables({{"STRATA_CLUSTER", broken}}, {});
    ASSERT_FALSE(r.ok()) << broken;
    EXPECT_NE(r.status().message().find("STRATA_CLUSTER"), std::string::npos) << r.status().ToString();
  }
}

TEST(ClusterResolver, HostDescriptionsRoundTripAsWorkersExchangeThem) {
  auto local = ClusterResolver::Local({.replicas = 3});
  ASSERT_TRUE(local.ok());
  const HostInfo& h = local->host_info[0];
  auto back = HostInfoFromJson(HostInfoJson(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->hostname, h.hostname);
  EXPECT_EQ(back->cpu_ids, h.cpu_ids);
  EXPECT_EQ(back->isa, h.isa);
  EXPECT_EQ(back->replicas, 3);
  EXPECT_EQ(back->peak.f32_gflops_per_core, h.peak.f32_gflops_per_core);
  EXPECT_FALSE(HostInfoFromJson("{\"hostname\": 3}").ok());
  EXPECT_FALSE(HostInfoFromJson("[").ok());
}

}  // namespace
}  // namespace strata::distribute
