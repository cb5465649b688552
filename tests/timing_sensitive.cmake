# Tests whose assertions depend on timing or on how threads are woken: each runs with no other
# test beside it (RUN_SERIAL), so a neighbour under `ctest -j` cannot decide whether it passes.
# Included by ctest after the discovered tests (tests/CMakeLists.txt); the "avx2:" copies of
# the unit tests are named too.
set(STRATA_TIMING_SENSITIVE_TESTS
  Handoff.InterleaveReadersAreWokenPerBurstNotPerElement
  Handoff.MapAndBatchPoolCoversAConsumerHoldingBatches
  AutotuneLive.RaisesParallelismOfASlowMap
  AutotuneLive.ReplicasShrinkTheCpuBudget
  MonitorTest.IdleMatchesIndependentlyTimedWaits
  MonitorTest.WaitInProgressCountsInEveryWindowItSpans
  MonitorTest.UtilizationOfAPureMatmulProgramMatchesFlopsOverTimeOverPeak
  MonitorTest.StarvedPipelineReadsIdleOverHalfAndTheReportNamesTheStage
  MonitorTest.PausedTimeIsInNoWindowAndNotInTheRunTotals
  MonitorCliTest.StarvedMatmulRunWritesReportTraceJsonlAndEventFile
  MonitorCliTest.MatmulUtilizationAgreesWithTheIndependentFigure
  MonitorCliTest.LiveNumbersOfARunningJobOverHttp
  MonitorPageTest.GaugesShowNumbersAndUpdateInHeadlessChromium
  # A bound of 60 s on the watchdog; busy loops on both cores that would slow any neighbour.
  MpiTrain.AStoppedRankIsNamedByStrataWatchdogWhichEndsTheJob
  MpiTrain.AKilledRankIsNamedByStrataWatchdogWhichEndsTheJob
  MpiTrain.TwoWorkersSlowedByCpuHogsTrainToTheEndWithoutAFalseAlarm
  # Namespaced hosts, one core each: a bound on the time a lost host takes to end the job, and a
  # slow link whose pace must be the job's own.
  HostsTrain.AHostWhoseCableIsPulledIsNamedAndTheJobEndsThenResumes
  HostsTrain.AFrozenHostIsNamedAndTheJobEndsThenResumes
  HostsTrain.ASlowLinkTrainsToTheEndWithTheDeadlineRaisedByThePace)
foreach(name ${STRATA_TIMING_SENSITIVE_TESTS})
  foreach(prefix "" "avx2:")
    # ctest ignores a name it does not know (a test of a binary not built in this pass).
    set_tests_properties("${prefix}${name}" PROPERTIES RUN_SERIAL TRUE)
  endforeach()
endforeach()
