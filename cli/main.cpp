#include <cstdio>
int main() { std::puts("dtrain: under construction"); return 0; }
