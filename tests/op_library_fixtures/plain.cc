// Not an opforge library: includes no opforge header, so carries no stamp.
extern "C" int plain_answer() { return 42; }
