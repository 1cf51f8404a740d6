import FuzzSupport

runFuzzer(fuzzOne)
